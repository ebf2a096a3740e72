compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --budget 1GiB -o @OUT/plan.json --trace @OUT/missing/t.json
