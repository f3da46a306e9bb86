-- Nexmark Query 1: Currency conversion, each bid's price in euros (the nexmark
-- project's q1.sql; its sink writes the stream `out`; DECIMAL is a double here).

CREATE TABLE nexmark_q1 (
  auction  BIGINT,
  bidder  BIGINT,
  price  DECIMAL(23, 3),
  `dateTime`  TIMESTAMP(3),
  extra  VARCHAR
) WITH (
  'stream' = 'out'
);

INSERT INTO nexmark_q1
SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    `dateTime`,
    extra
FROM bid;
