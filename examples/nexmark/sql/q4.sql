-- Nexmark Query 4: Average price for a category, the average of each closed auction's
-- winning bid per category (the nexmark project's q4.sql; its sink writes the stream
-- `out`). The inner join is a regular one (a bid between its auction's start and its
-- `expires`, which is not a time attribute): the SET line (Flink's own option) bounds its
-- state. Both aggregations have no window: their rows update the result (`$op`).

SET 'table.exec.state.ttl' = '1 d';

CREATE TABLE nexmark_q4 (
  id BIGINT,
  final BIGINT
) WITH (
  'stream' = 'out'
);

INSERT INTO nexmark_q4
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
