/*
 * libferry-copy-core: the bench's `core-copy` system, the ceiling's copy loop moved into C *inside* a
 * Python process, over confluent-kafka's own consumer and producer (bench/ceiling.py --core).
 *
 * It answers what a copy loop whose records never become Python objects costs when Python still owns
 * the clients and the bookkeeping: Python calls ferry_core_copy() once per batch (ctypes), the C loop
 * consumes up to a batch from the consumer's queue and produces each record to the same topic and
 * partition of the destination with its key, value, headers and timestamp plus Ferry's provenance
 * header, version 2 (`<prefix><source offset>`, the prefix Python's Stamper builds), and hands back one
 * summary per run of a partition's records (first and last offset, records, value bytes). The last
 * record of each run carries a Python delivery callback, through confluent-kafka's own delivery path:
 * the run's report, as Ferry's delivery runs have. The records between carry none.
 *
 * What it relies on in confluent-kafka (2.x, checked by the Python side before it calls in):
 *   - a client object starts with PyObject_HEAD then its rd_kafka_t * (confluent_kafka.h, Handle);
 *   - a produced record's opaque is a `struct { Handle *self; PyObject *dr_cb; }` allocated with
 *     calloc(), which its delivery callback calls (dr_cb(error, message)), releases (Py_DECREF) and
 *     frees; a NULL opaque has no callback and costs no Python call (Producer.c, dr_msg_cb).
 * The Python side takes the reference each callback's opaque holds (one per run) before the next poll.
 *
 * Which librdkafka: the wheel's, linked by its path (scripts/build-native-copy.sh), which is the very
 * library confluent-kafka's extension loaded: one copy of its symbols in the process.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <librdkafka/rdkafka.h>

/* confluent-kafka's per-record state (see above). */
struct confluent_msgstate {
    void *handle;
    void *dr_cb;
};

/* One run of a partition's records in a batch, as Python reads it (bench/ceiling.py, CoreRun). */
struct ferry_core_run {
    int32_t partition;
    int32_t topic_index; /* index into the topics Python passed */
    int64_t first_offset;
    int64_t last_offset;
    int64_t records;
    int64_t bytes;
};

/* Per-call results beside the runs. */
struct ferry_core_result {
    int64_t consumed;      /* messages taken from the queue, errors included */
    int64_t copied;        /* records handed to the producer */
    int64_t errors;        /* consumer errors passed over (a partition's end, a fetch error) */
    int64_t refused;       /* records the producer refused for good (not QUEUE_FULL) */
    int32_t runs;          /* entries written to the runs array */
    int32_t callbacks;     /* opaques made that hold a reference to the delivery callback */
    int32_t queue_full;    /* stopped at a full producer queue: serve it, then call again */
    int32_t unused;
};

static int topic_index(const char *name, const char *const *topics, int count) {
    for (int i = 0; i < count; i++)
        if (strcmp(name, topics[i]) == 0)
            return i;
    return -1;
}

/* Produces one record with the provenance header added. Returns 0 when the producer took it, 1 when its
 * queue is full (the record is as it was: the caller offers it again after Python served the queue), -1
 * when it refused it for good. The queue is never served here: a report carrying a Python callback must
 * run under confluent-kafka's own poll, which holds what its callback needs (the GIL, its call state). */
static int produce(rd_kafka_t *producer, rd_kafka_message_t *message, const char *header, const char *prefix,
                   size_t prefix_len, void *opaque) {
    char value[256];
    if (prefix_len > sizeof value - 24)
        return -1;
    memcpy(value, prefix, prefix_len);
    int digits = snprintf(value + prefix_len, sizeof value - prefix_len, "%lld", (long long)message->offset);
    rd_kafka_headers_t *headers = NULL;
    if (rd_kafka_message_detach_headers(message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR || headers == NULL)
        headers = rd_kafka_headers_new(1);
    rd_kafka_header_add(headers, header, -1, value, (ssize_t)prefix_len + digits);
    rd_kafka_timestamp_type_t timestamp_type;
    int64_t timestamp = rd_kafka_message_timestamp(message, &timestamp_type);
    rd_kafka_resp_err_t err = rd_kafka_producev(
        producer, RD_KAFKA_V_TOPIC(rd_kafka_topic_name(message->rkt)), RD_KAFKA_V_PARTITION(message->partition),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(message->payload, message->len),
        RD_KAFKA_V_KEY(message->key, message->key_len),
        RD_KAFKA_V_TIMESTAMP(timestamp_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? 0 : timestamp),
        RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    /* Not produced: the headers are still ours. Without the header just added, they go back on the record. */
    rd_kafka_header_remove(headers, header);
    rd_kafka_message_set_headers(message, headers);
    return err == RD_KAFKA_RESP_ERR__QUEUE_FULL ? 1 : -1;
}

/* The batch consumed and not yet copied: messages[next..end). What a full queue leaves waits here for the
 * next call, which takes no new records before these. One copy loop per process (the bench's). */
static rd_kafka_message_t **messages = NULL;
static ssize_t capacity = 0, next = 0, end = 0;

/* Whether `message` already carries a header named `header`: a copy of a copy, which this loop does not
 * take (Python's stamper would: the bench's topics hold none). */
static int has_header(const rd_kafka_message_t *message, const char *header) {
    rd_kafka_headers_t *headers = NULL;
    const void *value;
    size_t size;
    return rd_kafka_message_headers(message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           rd_kafka_header_get_last(headers, header, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

/*
 * Copies a batch (see the file's comment): the records a full queue left last time, or else up to `most`
 * messages from `consumer`'s queue (waiting up to `timeout_ms` for the first). `topics`/`prefixes`: the
 * source topics and each one's provenance prefix. `producer_handle`/`on_run_delivered`: the
 * confluent-kafka Producer and the callable the last record of each run carries. Stops at a full
 * queue (result->queue_full; Python serves it, then calls again). Returns 0, or -1 when memory ran out.
 */
int ferry_core_copy(rd_kafka_t *consumer, rd_kafka_t *producer, int timeout_ms, int most, const char *header,
                    const char *const *topics, const char *const *prefixes, const size_t *prefix_lens, int topic_count,
                    void *producer_handle, void *on_run_delivered, struct ferry_core_run *runs, int max_runs,
                    struct ferry_core_result *result) {
    memset(result, 0, sizeof *result);
    if (next == end) {
        if (most > capacity) {
            rd_kafka_message_t **grown = realloc(messages, sizeof *messages * (size_t)most);
            if (grown == NULL)
                return -1;
            messages = grown;
            capacity = most;
        }
        rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(consumer);
        ssize_t received = rd_kafka_consume_batch_queue(queue, timeout_ms, messages, (size_t)most);
        rd_kafka_queue_destroy(queue);
        next = 0;
        end = received < 0 ? 0 : received;
        result->consumed = end;
    }
    struct ferry_core_run *run = NULL;
    for (; next < end; next++) {
        rd_kafka_message_t *message = messages[next];
        if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR || has_header(message, header)) {
            result->errors++;
            rd_kafka_message_destroy(message);
            continue;
        }
        const char *topic = rd_kafka_topic_name(message->rkt);
        if (run == NULL || run->partition != message->partition || strcmp(topics[run->topic_index], topic) != 0) {
            int index = topic_index(topic, topics, topic_count);
            if (index < 0 || result->runs >= max_runs) {
                result->errors++;
                rd_kafka_message_destroy(message);
                continue;
            }
            run = &runs[result->runs++];
            run->partition = message->partition;
            run->topic_index = index;
            run->first_offset = message->offset;
            run->last_offset = message->offset - 1;
            run->records = run->bytes = 0;
        }
        /* The run's last record: the next message is another partition's, or the batch ends. */
        int last = 1;
        for (ssize_t j = next + 1; j < end; j++) {
            if (messages[j]->err != RD_KAFKA_RESP_ERR_NO_ERROR)
                continue;
            last = messages[j]->partition != message->partition || messages[j]->rkt != message->rkt;
            break;
        }
        struct confluent_msgstate *opaque = NULL;
        if (last) {
            opaque = calloc(1, sizeof *opaque);
            if (opaque == NULL)
                return -1;
            opaque->handle = producer_handle;
            opaque->dr_cb = on_run_delivered;
        }
        int produced = produce(producer, message, header, prefixes[run->topic_index], prefix_lens[run->topic_index],
                               opaque);
        if (produced == 1) { /* a full queue: this record is offered again on the next call */
            free(opaque);
            result->queue_full = 1;
            return 0;
        }
        if (produced < 0) {
            free(opaque);
            result->refused++;
        } else {
            result->callbacks += opaque != NULL;
            result->copied++;
            run->records++;
            run->bytes += (int64_t)message->len;
            run->last_offset = message->offset;
        }
        rd_kafka_message_destroy(message);
    }
    return 0;
}
