from compatcheck.cli import main

main()
