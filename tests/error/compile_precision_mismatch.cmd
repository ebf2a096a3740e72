compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --budget 1MiB --precision bf16 -o /tmp/ucplan-error-test-output.json
