compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --budget 1MiB --solver exact --time-limit 1e2s -o /tmp/ucplan-error-test-output.json
