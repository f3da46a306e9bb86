-- Nexmark Query 6: Average selling price by seller, the average of the winning bids
-- of each seller's last 11 closed auctions (the nexmark project's q6.sql; its sink
-- writes the stream `out`). Two changes, both required by SQL itself: the inner query
-- selected B.`dateTime`, which is neither grouped nor aggregated (Flink refuses it
-- too); an auction closes at its `expires`, so that is the order (grouped, and
-- selected as `dateTime`). SET bounds the regular join's state, as in q4. The OVER
-- aggregate reads an updating input (Flink does not run that, FLINK-19059): its rows
-- update the result (`$op`: -D takes a row back, +I writes one).

SET 'table.exec.state.ttl' = '1 d';

CREATE TABLE nexmark_q6 (
  seller VARCHAR,
  avg_price  BIGINT
) WITH (
  'stream' = 'out'
);

INSERT INTO nexmark_q6
SELECT
    Q.seller,
    AVG(Q.final) OVER
        (PARTITION BY Q.seller ORDER BY Q.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
    SELECT MAX(B.price) AS final, A.seller, A.expires AS `dateTime`
    FROM auction AS A, bid AS B
    WHERE A.id = B.auction and B.`dateTime` between A.`dateTime` and A.expires
    GROUP BY A.id, A.seller, A.expires
) AS Q;
