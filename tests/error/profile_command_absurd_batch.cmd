profile @FILE --batch 1048576 --device model:k40 -o @OUT/profile.json
