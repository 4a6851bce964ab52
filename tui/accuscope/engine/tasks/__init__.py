"""The task folder: task.json, the result files, saving atomically, running a comparison into it."""
