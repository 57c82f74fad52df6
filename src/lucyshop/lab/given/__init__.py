"""What a chapter file is given: it imports these modules, and a student reads them but does not
change them.

``stubs`` (NotStarted), ``exercise_kit`` (the answers' shop readers), ``renewals`` (exercise 5's
record of renewals) and ``pg_shop`` (exercise 7's PostgreSQL shop)."""
