-- Nexmark Query 2: Selection, the bids on every 123rd auction (the nexmark project's
-- q2.sql; its sink writes the stream `out`).

CREATE TABLE nexmark_q2 (
  auction  BIGINT,
  price  BIGINT
) WITH (
  'stream' = 'out'
);

INSERT INTO nexmark_q2
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
