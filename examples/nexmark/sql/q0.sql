-- Nexmark Query 0: Pass through (the nexmark project's q0.sql; its sink table writes
-- the stream `out` instead of the blackhole connector).

CREATE TABLE nexmark_q0 (
  auction  BIGINT,
  bidder  BIGINT,
  price  BIGINT,
  `dateTime`  TIMESTAMP(3),
  extra  VARCHAR
) WITH (
  'stream' = 'out'
);

INSERT INTO nexmark_q0
SELECT auction, bidder, price, `dateTime`, extra FROM bid;
