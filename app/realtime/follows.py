"""Which pull-mode authors this process's live users follow, kept both ways.

Why a map of its own: a pull-mode author's posts reach a process only through the author's
channel, which the process joins while at least one of its users follows that author and
leaves when the last one goes. The two directions change together; every change says which
authors gained their first local follower (join their channel) or lost their last (leave it).
"""

from __future__ import annotations


class PullFollows:
    """Local user -> pull-mode authors followed, and author -> local users following."""

    __slots__ = ("followers", "follows")

    def __init__(self) -> None:
        self.follows: dict[int, set[int]] = {}  # local user -> pull-mode authors followed
        self.followers: dict[int, set[int]] = {}  # pull-mode author -> local users

    def set(self, user_id: int, authors: set[int]) -> tuple[list[int], list[int]]:
        """The user now follows exactly `authors`: (authors first followed here, authors no
        local user follows any more)."""
        old = self.follows.get(user_id, set())
        first: list[int] = []
        last: list[int] = []
        for author in authors - old:
            followers = self.followers.setdefault(author, set())
            if not followers:
                first.append(author)
            followers.add(user_id)
        for author in old - authors:
            followers = self.followers.get(author, set())
            followers.discard(user_id)
            if not followers:
                self.followers.pop(author, None)
                last.append(author)
        if authors:
            self.follows[user_id] = authors
        else:
            self.follows.pop(user_id, None)
        return first, last

    def forget(self, user_id: int) -> list[int]:
        """The user left this process: the authors no local user follows any more."""
        last: list[int] = []
        for author in self.follows.pop(user_id, set()):
            followers = self.followers.get(author)
            if followers is not None:
                followers.discard(user_id)
                if not followers:
                    del self.followers[author]
                    last.append(author)
        return last
