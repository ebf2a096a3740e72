compile @FILE --profile @DIR/inputs/chain3bn-b4-k40.json --batch 3 --budget 1GiB -o @OUT/plan.json
