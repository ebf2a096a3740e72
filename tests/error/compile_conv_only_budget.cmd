compile resnet20 --profile @DIR/../../profiles/model/resnet20-b64-k40.json --conv-only --budget 50%
