calibrate @DIR/../../profiles/model/resnet20-b64-k40.json -t @FILE -o @OUT/p.json
