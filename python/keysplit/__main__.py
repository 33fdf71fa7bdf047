import sys

from keysplit.cli import main

sys.exit(main())
