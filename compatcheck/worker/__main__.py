import sys

from compatcheck.worker.main import main

sys.exit(main(sys.argv[1:]))
