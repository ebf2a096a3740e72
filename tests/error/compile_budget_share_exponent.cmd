compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --budget 1e2% -o /tmp/ucplan-error-test-output.json
