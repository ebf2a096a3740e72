compile @FILE --profile @DIR/inputs --budget 1GiB -o @OUT/plan.json
