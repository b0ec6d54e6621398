"""`python -m narrative_eval.weights [--path] [WEIGHTS...]`: convert GGUF models to Hugging Face format now."""

from narrative_eval.weights.convert import main

raise SystemExit(main())
