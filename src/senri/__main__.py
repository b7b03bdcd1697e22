import sys

from senri.cli import main

sys.exit(main())
