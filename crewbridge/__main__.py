from crewbridge.cli import main

main()
