from applyonce.cli import main

main()
