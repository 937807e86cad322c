"""What leaves hpcenv for people: tables, JUnit XML, JSON and text output."""
