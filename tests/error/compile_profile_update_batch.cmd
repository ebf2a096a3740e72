compile @DIR/inputs/chain3.json --profile @FILE --budget 1MiB -o @OUT/plan.json
