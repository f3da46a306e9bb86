"""Orders joined with their shipments within a day (``IntervalJoin``, a left join).

``python -m examples.order_shipments``: every shipment sent within 24 hours of its
order is paired with it, whatever order the events arrive in; orders not shipped
within the day come out alone once the day is over.
"""
