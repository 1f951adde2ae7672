head
pad 0
pad 1
pad 2
if ok:
    run()
    log()
mid 0
mid 1
mid 2
mid 3
if ok:
    run()
    log()
tail
