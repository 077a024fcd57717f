"""Power loss: a filesystem layer that forgets every write its files have not synced yet.

Why a filesystem and not a kill: SIGKILL never loses a committed SQLite transaction, because the
operating system still writes back what the dead process handed it. A power cut (or an OS crash)
loses what sat in the disk cache: every write since the file's last ``fsync``/``fdatasync``. With
``journal_mode=WAL; synchronous=NORMAL`` SQLite syncs the WAL only at a checkpoint, so a commit that
a worker saw accepted can be rolled back. The layer here is a FUSE passthrough (``mfusepy`` on
``libfuse3``) over a plain folder that keeps, for every file, the content it had at its last sync
(:mod:`.durability`), runs as its own process (:mod:`.daemon`), and is driven by the coordinator
through :class:`.layer.PowerLossLayer`: ``cut()`` (the power goes: every further request fails) and
``reboot()`` (unmount, put back each file's synced content, mount again).
"""
