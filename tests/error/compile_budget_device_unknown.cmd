compile @FILE --profile @DIR/inputs/chain3-b4-no-memory.json --budget device -o @OUT/plan.json
