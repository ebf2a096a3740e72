compile @FILE --profile @DIR/inputs/chain3-b4-k40-recompute-op.json --budget 1MiB -o @OUT/plan.json
