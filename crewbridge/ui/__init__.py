"""`crew ui`: every run of crew in a browser, live, with approvals and cancel (crewbridge.ui.server);
the runs from crew's transcripts (runs), the runs' end of the Unix socket (desk), batches (batches),
and the page's script and style (static/, package data: nothing is fetched from elsewhere)."""
