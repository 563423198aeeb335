from bench.run_all import main

main()
