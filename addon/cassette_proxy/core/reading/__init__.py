"""What a cassette says (its conversation, its summary), and what a miss says (differences, the closest recordings)."""
