compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --budget 1MiB --sub-batch 8 -o /tmp/ucplan-error-test-output.json
