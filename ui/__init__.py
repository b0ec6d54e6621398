"""The narrative-eval app (Gradio): browse runs, compare infills, fill blanks live, launch sweeps,
read conversations, annotate blind, and see a sweep's figures. Start it with `python -m ui`."""
