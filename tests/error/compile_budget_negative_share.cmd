compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --budget -5% -o @OUT/plan.json
