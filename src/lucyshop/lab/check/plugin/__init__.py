"""What ``make check`` loads into each pytest child it starts (``-p``): the plugin that writes
every test's outcome where the check reads it. The grader's machinery, not a test."""
