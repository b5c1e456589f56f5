"""Topics: the fenced topic commands, the topic observer, lag and progress, and the read side any controller answers
from."""
