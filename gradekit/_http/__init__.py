"""gradekit/_http."""
