compile resnet20 --profile @FILE --budget 1GiB -o @OUT/p.json
