compile @DIR/inputs/chain3.json --profile @FILE --precision bf16 --budget 1MiB -o @OUT/plan.json
