"""The record of a run: its events, typed (events), the stream every part of a run reports to and
every face reads (stream: Record), written down and read back (transcript), and the runs index
(index). Nothing is imported here: a run's id (ids) is made before the record's types load."""
