from midtrace.cli import main

main()
