"""The Textual front end. It knows the engine; the engine never knows it."""
