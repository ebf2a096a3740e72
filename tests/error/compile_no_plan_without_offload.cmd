compile @FILE --profile @DIR/../../profiles/model/resnet20-b64-k40.json --budget 15MiB --offload never -o @OUT/plan.json
