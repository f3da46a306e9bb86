-- Nexmark Query 3: Local item suggestion, the category-10 auctions of sellers in OR,
-- ID or CA (the nexmark project's q3.sql; its sink writes the stream `out`). A
-- regular join keeps every row for ever in Flink unless a state TTL is set: the SET
-- line (Flink's own option) is added so that its state is bounded (a day, counted in
-- event time here).

SET 'table.exec.state.ttl' = '1 d';

CREATE TABLE nexmark_q3 (
  name  VARCHAR,
  city  VARCHAR,
  state  VARCHAR,
  id  BIGINT
) WITH (
  'stream' = 'out'
);

INSERT INTO nexmark_q3
SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P on A.seller = P.id
WHERE
    A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
