"""A lab's figures, each made once and carrying how it was taken: ``figure`` (one figure: its
value, unit, rounding as shown and pass), ``lab_figures`` (the record of one lab every face
renders)."""
