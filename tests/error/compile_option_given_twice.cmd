compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --budget 1MiB --budget 2MiB -o @OUT/plan.json
