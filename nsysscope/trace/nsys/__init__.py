"""The nsys reader: an Nsight Systems SQLite export (or a report, or a compressed export, made
one: :mod:`.sources`, :mod:`.nsys_rep`) read into the normalised trace (:mod:`.read`): its
schema and what differs between nsys versions (:mod:`.schema`), the host-side tables
(:mod:`.tables`), the GPU side (:mod:`.gpu_work`), where a time window's rows lie in the big
tables (:mod:`.zones`), and damage told apart from a bug (:mod:`.damage`)."""
