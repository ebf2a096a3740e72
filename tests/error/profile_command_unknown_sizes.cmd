profile @FILE --batch 4 --device model:k40 --sizes some -o /tmp/ucplan-error-test-output.json
