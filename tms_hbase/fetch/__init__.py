"""Reading: messages in order through holes and swept gaps, time seeks, row inspection, lag and topic statistics."""
