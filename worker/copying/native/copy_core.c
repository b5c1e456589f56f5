/*
 * libferry-copy-core: the copy loop's per-record work in C (worker/copying/core.py drives it).
 *
 * A route copier's records never become Python objects on the common path: this library takes a batch
 * from the confluent-kafka consumer's own queue and hands each run of a partition's records to the
 * confluent-kafka producer, stamped with Ferry's provenance header (version 2: `<prefix><source offset>`).
 * Which prefix a record's copy gets, or whether it is skipped, is a function of its source topic and the
 * provenance header it carries up to its last `|` (none: a local record): Python's stamper computes it
 * the first time and teaches it here (ferry_core_learn), so a copy of a copy costs C alone from then on.
 * Python decides per run (which partition, its destination, its delivery callbacks, how many value bytes
 * it may hold) and keeps every piece of bookkeeping; anything else (a consumer error, a record whose
 * header was not learned yet, a partition the Python sender must handle) Python takes item by item
 * through the accessors below.
 *
 * What it relies on in confluent-kafka 2.x (worker/copying/core.py checks the version before loading):
 *   - a client object starts with PyObject_HEAD, then its rd_kafka_t * (confluent_kafka.h, Handle);
 *   - a produced record's opaque is a `struct { Handle *self; PyObject *dr_cb; }` from calloc(), which
 *     confluent-kafka's delivery callback calls as dr_cb(error, message), then releases (Py_DECREF) and
 *     frees; a NULL opaque costs no Python call (Producer.c, dr_msg_cb). Python takes the reference each
 *     opaque holds (the counts in ferry_core_run_out) before it polls the producer.
 * And in librdkafka: the consumer's queue is read with the event API (rd_kafka_queue_poll), which
 * returns its log and error events instead of calling confluent-kafka's callbacks for them (those need
 * the call state confluent-kafka sets up around its own calls); control records are never returned.
 * The records themselves come from a fetch queue of the core's own, which each assigned partition's queue
 * is forwarded to (ferry_core_forward), read a batch per call (rd_kafka_consume_batch_queue): one lock
 * and one clock reading per batch rather than per record, and no event to make and free per record.
 * Only a partition's fetched records and errors reach it (never a log line or a commit's answer, whose
 * callbacks could not run there). librdkafka keeps a forward the application set across a partition's
 * assignments but clears it when the partition is unassigned, so Python forwards every partition after
 * each assignment; records fetched before a partition was forwarded are in the consumer's queue, which
 * each fetch reads first, so a partition's records still come in order.
 *
 * One copier's thread calls it, between its own consumer and producer calls: no locks.
 */
#define _GNU_SOURCE /* memrchr */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <librdkafka/rdkafka.h>

/* What the next pending item is (ferry_core_item.kind). */
enum {
    ITEM_COPY = 0,    /* a record whose copy's prefix is known */
    ITEM_UNKNOWN = 1, /* a record whose header (or topic) was not learned, or is not one C reads */
    ITEM_ERROR = 2,
    ITEM_LOG = 3,
    ITEM_COMMIT = 4,
    ITEM_OTHER = 5,
    ITEM_SKIP = 6 /* a record not for the route's destination */
};
/* Learned actions kept at most; all are dropped beyond (each is learned again on its next record), as the
 * stamper's own cache does. */
#define MAX_LEARNED 4096
/* How a run's call ended (ferry_core_run_out.status). */
enum { RUN_CLOSED = 0, RUN_QUEUE_FULL = 1, RUN_REFUSED = 2 };

struct confluent_msgstate {
    void *handle;
    void *dr_cb;
};

/* What the copy of a source topic's record with a given previous header (or none) gets. */
struct learned {
    char *topic;
    char *head; /* the previous header up to its last `|` (version 3: all of it); NULL: a local record */
    size_t head_len;
    int skip;
    char *prefix;
    size_t prefix_len;
};

struct ferry_core {
    struct learned *learned;
    int learned_count, learned_capacity;
    rd_kafka_queue_t *fetch_queue;       /* where the assigned partitions' queues are forwarded */
    rd_kafka_event_t **events;           /* the pending batch: events[next..end); NULL: a record of fetch_queue */
    const rd_kafka_message_t **messages; /* each record (a FETCH event's or fetch_queue's), else NULL */
    ssize_t capacity, next, end;
    char header[256];                    /* the provenance header's name */
    char error_topic[256];               /* the topic of the error event peeked last */
};

struct ferry_core_item {
    const char *topic; /* NULL: an event of no partition */
    int32_t partition;
    int32_t kind;
    int64_t offset;
    int64_t size;  /* value bytes */
    int32_t error; /* ITEM_ERROR: its code; ITEM_LOG: its level */
    int32_t unused;
};

struct ferry_core_record {
    const void *value;
    size_t value_len;
    const void *key;
    size_t key_len;
    int64_t timestamp;
    int32_t timestamp_type;
    int32_t headers;
};

struct ferry_core_run_args {
    rd_kafka_t *producer;
    const char *destination_topic;
    int32_t destination_partition;
    int32_t unused;
    void *producer_handle;
    void *on_first;
    void *on_between; /* NULL: the records between the ends carry no callback */
    void *on_last;
    int64_t room;        /* value bytes the run may hold */
    int64_t alone_above; /* a larger record is a run of its own */
    int64_t handed_before;
    int64_t bytes_before;
};

struct ferry_core_run_out {
    int64_t handed;
    int64_t bytes;
    int32_t status;
    int32_t error;      /* RUN_REFUSED: the producer's error code */
    int32_t first_refs; /* opaques made that hold a reference to on_first, on_between and on_last */
    int32_t between_refs;
    int32_t last_refs;
    int32_t unused;
    int64_t first_offset; /* the source offsets of the first and the last record handed (when handed > 0): */
    int64_t last_offset;  /* consecutive when they are handed - 1 apart, and Python takes them as a span */
};

struct ferry_core *ferry_core_new(const char *header) {
    struct ferry_core *core = calloc(1, sizeof *core);
    if (core == NULL)
        return NULL;
    snprintf(core->header, sizeof core->header, "%s", header);
    return core;
}

static void forget_all(struct ferry_core *core) {
    for (int i = 0; i < core->learned_count; i++) {
        free(core->learned[i].topic);
        free(core->learned[i].head);
        free(core->learned[i].prefix);
    }
    core->learned_count = 0;
}

/* Frees pending item `index`: an event, or a record of the fetch queue. */
static void release(struct ferry_core *core, ssize_t index) {
    if (core->events[index] != NULL)
        rd_kafka_event_destroy(core->events[index]);
    else
        rd_kafka_message_destroy((rd_kafka_message_t *)core->messages[index]);
}

void ferry_core_free(struct ferry_core *core) {
    for (ssize_t i = core->next; i < core->end; i++)
        release(core, i);
    if (core->fetch_queue != NULL)
        rd_kafka_queue_destroy(core->fetch_queue);
    forget_all(core);
    free(core->learned);
    free(core->events);
    free(core->messages);
    free(core);
}

/* The core's fetch queue, made on first use for `consumer`: NULL when memory ran out. */
static rd_kafka_queue_t *fetch_queue_of(struct ferry_core *core, rd_kafka_t *consumer) {
    if (core->fetch_queue == NULL)
        core->fetch_queue = rd_kafka_queue_new(consumer);
    return core->fetch_queue;
}

/*
 * Forwards `topic`/`partition`'s queue of `consumer` (assigned) to the core's fetch queue: its records come
 * from there from now on. Returns 0, or -1 when the partition's queue could not be had.
 */
int ferry_core_forward(struct ferry_core *core, rd_kafka_t *consumer, const char *topic, int32_t partition) {
    rd_kafka_queue_t *fetch_queue = fetch_queue_of(core, consumer);
    rd_kafka_queue_t *partition_queue = rd_kafka_queue_get_partition(consumer, topic, partition);
    if (fetch_queue == NULL || partition_queue == NULL) {
        if (partition_queue != NULL)
            rd_kafka_queue_destroy(partition_queue);
        return -1;
    }
    rd_kafka_queue_forward(partition_queue, fetch_queue);
    rd_kafka_queue_destroy(partition_queue);
    return 0;
}

/* Appends `event` to the pending batch (an empty FETCH event is freed). */
static void take_event(struct ferry_core *core, rd_kafka_event_t *event) {
    const rd_kafka_message_t *message = NULL;
    if (rd_kafka_event_type(event) == RD_KAFKA_EVENT_FETCH) {
        message = rd_kafka_event_message_next(event);
        if (message == NULL) {
            rd_kafka_event_destroy(event);
            return;
        }
    }
    core->events[core->end] = event;
    core->messages[core->end++] = message;
}

/* Appends up to `most` records of the fetch queue that are there already to the pending batch. */
static void take_records(struct ferry_core *core, rd_kafka_queue_t *fetch_queue, int most) {
    if (core->end >= most)
        return;
    ssize_t taken = rd_kafka_consume_batch_queue(fetch_queue, 0, (rd_kafka_message_t **)&core->messages[core->end],
                                                 (size_t)(most - core->end));
    for (ssize_t i = 0; i < taken; i++)
        core->events[core->end++] = NULL;
}

/*
 * Takes up to `most` items when none is pending: first what the consumer's queue holds (its log lines, errors
 * and commit answers, and records fetched before their partition was forwarded), then the fetch queue's
 * records; when both are empty, waits up to `timeout_ms` for the fetch queue's first record (the consumer's
 * queue is read again on the next call). rd_kafka_consume_batch_queue is only asked for what is there: it
 * would wait out its whole timeout for a full batch. Returns how many are pending, or -1 when memory ran out.
 */
int ferry_core_fetch(struct ferry_core *core, rd_kafka_t *consumer, int timeout_ms, int most) {
    if (core->next < core->end)
        return (int)(core->end - core->next);
    if (most > core->capacity) {
        rd_kafka_event_t **events = realloc(core->events, sizeof *events * (size_t)most);
        if (events == NULL)
            return -1;
        core->events = events;
        const rd_kafka_message_t **messages = realloc(core->messages, sizeof *messages * (size_t)most);
        if (messages == NULL)
            return -1;
        core->messages = messages;
        core->capacity = most;
    }
    core->next = core->end = 0;
    rd_kafka_queue_t *fetch_queue = fetch_queue_of(core, consumer);
    if (fetch_queue == NULL)
        return -1;
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(consumer);
    rd_kafka_event_t *event;
    while (core->end < most && (event = rd_kafka_queue_poll(queue, 0)) != NULL)
        take_event(core, event);
    rd_kafka_queue_destroy(queue);
    take_records(core, fetch_queue, most);
    if (core->end == 0 && timeout_ms > 0 && (event = rd_kafka_queue_poll(fetch_queue, timeout_ms)) != NULL) {
        take_event(core, event);
        take_records(core, fetch_queue, most);
    }
    return (int)core->end;
}

/*
 * Teaches what the copy of `topic`'s record gets: for a record whose provenance header, up to its last `|`,
 * is `head` (`is_local`: a record without one), either nothing (`skip`) or the header `prefix` followed by
 * its source offset. Returns 0, or -1 when memory ran out.
 */
int ferry_core_learn(struct ferry_core *core, const char *topic, const char *head, size_t head_len, int is_local,
                     int skip, const char *prefix, size_t prefix_len) {
    if (core->learned_count >= MAX_LEARNED)
        forget_all(core);
    if (core->learned_count == core->learned_capacity) {
        int capacity = core->learned_capacity ? core->learned_capacity * 2 : 16;
        struct learned *grown = realloc(core->learned, sizeof *grown * (size_t)capacity);
        if (grown == NULL)
            return -1;
        core->learned = grown;
        core->learned_capacity = capacity;
    }
    struct learned *entry = &core->learned[core->learned_count];
    memset(entry, 0, sizeof *entry);
    entry->topic = strdup(topic);
    entry->skip = skip;
    if (!is_local) {
        entry->head = malloc(head_len + 1);
        if (entry->head != NULL) {
            memcpy(entry->head, head, head_len);
            entry->head[head_len] = '\0';
        }
        entry->head_len = head_len;
    }
    if (!skip) {
        entry->prefix = malloc(prefix_len + 1);
        if (entry->prefix != NULL)
            memcpy(entry->prefix, prefix, prefix_len);
        entry->prefix_len = prefix_len;
    }
    if (entry->topic == NULL || (!is_local && entry->head == NULL) || (!skip && entry->prefix == NULL)) {
        free(entry->topic);
        free(entry->head);
        free(entry->prefix);
        return -1;
    }
    core->learned_count++;
    return 0;
}

static const struct learned *find(const struct ferry_core *core, const char *topic, const char *head, size_t head_len,
                                  int is_local) {
    for (int i = 0; i < core->learned_count; i++) {
        const struct learned *entry = &core->learned[i];
        if ((entry->head == NULL) != is_local || strcmp(entry->topic, topic) != 0)
            continue;
        if (is_local || (entry->head_len == head_len && memcmp(entry->head, head, head_len) == 0))
            return entry;
    }
    return NULL;
}

/*
 * What the copy of `message` gets: ITEM_COPY (with `entry` its prefix), ITEM_SKIP, or ITEM_UNKNOWN: not
 * learned yet, or a header C does not read as the stamper would (a version 2 header whose source offset
 * is not plain digits; the stamper decides those).
 */
static int action_of(const struct ferry_core *core, const rd_kafka_message_t *message, const struct learned **entry) {
    rd_kafka_headers_t *headers = NULL;
    const void *value = NULL;
    size_t size = 0;
    const char *topic = rd_kafka_topic_name(message->rkt);
    if (rd_kafka_message_headers(message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(headers, core->header, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        *entry = find(core, topic, NULL, 0, 1);
    } else {
        const char *text = value;
        if (text == NULL || size == 0)
            return ITEM_UNKNOWN;
        size_t head_len = size;
        if (!(size >= 2 && text[0] == '3' && text[1] == '|')) {
            /* Version 2 (or older): the head is all before the last `|`, the tail a source offset. */
            const char *bar = memrchr(text, '|', size);
            if (bar == NULL || bar + 1 == text + size)
                return ITEM_UNKNOWN;
            for (const char *digit = bar + 1; digit < text + size; digit++)
                if (*digit < '0' || *digit > '9')
                    return ITEM_UNKNOWN;
            head_len = (size_t)(bar - text);
        }
        *entry = find(core, topic, text, head_len, 0);
    }
    if (*entry == NULL)
        return ITEM_UNKNOWN;
    return (*entry)->skip ? ITEM_SKIP : ITEM_COPY;
}

/* Describes the next pending item; 0 when none is pending. */
int ferry_core_peek(struct ferry_core *core, struct ferry_core_item *item) {
    if (core->next >= core->end)
        return 0;
    memset(item, 0, sizeof *item);
    rd_kafka_event_t *event = core->events[core->next];
    const rd_kafka_message_t *message = core->messages[core->next];
    if (message != NULL) {
        item->topic = message->rkt == NULL ? NULL : rd_kafka_topic_name(message->rkt);
        item->partition = message->partition;
        item->offset = message->offset;
        item->size = (int64_t)message->len;
        if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            item->kind = ITEM_ERROR;
            item->error = message->err;
        } else {
            const struct learned *entry;
            item->kind = action_of(core, message, &entry);
        }
        return 1;
    }
    item->partition = -1;
    item->offset = -1;
    switch (rd_kafka_event_type(event)) {
    case RD_KAFKA_EVENT_ERROR: {
        item->kind = ITEM_ERROR;
        item->error = rd_kafka_event_error(event);
        rd_kafka_topic_partition_t *where = rd_kafka_event_topic_partition(event);
        if (where != NULL) {
            snprintf(core->error_topic, sizeof core->error_topic, "%s", where->topic);
            item->topic = core->error_topic;
            item->partition = where->partition;
            item->offset = where->offset;
            rd_kafka_topic_partition_destroy(where);
        }
        break;
    }
    case RD_KAFKA_EVENT_LOG: {
        const char *facility, *text;
        int level = 0;
        rd_kafka_event_log(event, &facility, &text, &level);
        item->kind = ITEM_LOG;
        item->error = level;
        break;
    }
    case RD_KAFKA_EVENT_OFFSET_COMMIT:
        item->kind = ITEM_COMMIT;
        item->error = rd_kafka_event_error(event);
        break;
    default:
        item->kind = ITEM_OTHER;
        break;
    }
    return 1;
}

/* The next pending item's committed partition `index` (an OFFSET_COMMIT event's): 0 when there is none. */
int ferry_core_committed(struct ferry_core *core, int index, const char **topic, int32_t *partition, int64_t *offset,
                         int32_t *error) {
    if (core->next >= core->end || core->messages[core->next] != NULL)
        return 0;
    rd_kafka_event_t *event = core->events[core->next];
    if (rd_kafka_event_type(event) != RD_KAFKA_EVENT_OFFSET_COMMIT)
        return 0;
    const rd_kafka_topic_partition_list_t *partitions = rd_kafka_event_topic_partition_list(event);
    if (partitions == NULL || index < 0 || index >= partitions->cnt)
        return 0;
    const rd_kafka_topic_partition_t *one = &partitions->elems[index];
    *topic = one->topic;
    *partition = one->partition;
    *offset = one->offset;
    *error = one->err;
    return 1;
}

/* The next pending item's record (a FETCH event's); 0 when it is not one. */
int ferry_core_record(struct ferry_core *core, struct ferry_core_record *out) {
    if (core->next >= core->end || core->messages[core->next] == NULL)
        return 0;
    const rd_kafka_message_t *message = core->messages[core->next];
    rd_kafka_timestamp_type_t timestamp_type;
    out->value = message->payload;
    out->value_len = message->payload == NULL ? 0 : message->len;
    out->key = message->key;
    out->key_len = message->key_len;
    out->timestamp = rd_kafka_message_timestamp(message, &timestamp_type);
    out->timestamp_type = (int32_t)timestamp_type;
    rd_kafka_headers_t *headers = NULL;
    out->headers = rd_kafka_message_headers(message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR
                       ? (int32_t)rd_kafka_header_cnt(headers)
                       : 0;
    return 1;
}

/* The next pending record's header `index`: 0 when there is none. `value` is NULL for a null value. */
int ferry_core_header(struct ferry_core *core, int index, const char **name, const void **value, size_t *size) {
    if (core->next >= core->end || core->messages[core->next] == NULL)
        return 0;
    rd_kafka_headers_t *headers = NULL;
    if (rd_kafka_message_headers(core->messages[core->next], &headers) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    return rd_kafka_header_get_all(headers, (size_t)index, name, value, size) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* The next pending item's error text: a record's error or an error event's reason. */
int ferry_core_error_text(struct ferry_core *core, char *out, size_t size) {
    if (core->next >= core->end)
        return 0;
    const rd_kafka_message_t *message = core->messages[core->next];
    if (message != NULL)
        snprintf(out, size, "%s", rd_kafka_message_errstr(message));
    else
        snprintf(out, size, "%s", rd_kafka_event_error_string(core->events[core->next]));
    return 1;
}

/* The next pending log line's facility and text (valid until it is dropped); 0 when it is not one. */
int ferry_core_log(struct ferry_core *core, const char **facility, const char **text) {
    if (core->next >= core->end || core->messages[core->next] != NULL ||
        rd_kafka_event_type(core->events[core->next]) != RD_KAFKA_EVENT_LOG)
        return 0;
    int level = 0;
    return rd_kafka_event_log(core->events[core->next], facility, text, &level) == 0;
}

/* Drops the next pending item. */
void ferry_core_drop(struct ferry_core *core) {
    if (core->next < core->end)
        release(core, core->next++);
}

/* Drops the next pending records while they are records of the same partition as the first: a stopped
 * partition's, fetched before its pause took effect. Returns how many. */
int64_t ferry_core_drop_run(struct ferry_core *core) {
    if (core->next >= core->end || core->messages[core->next] == NULL)
        return 0;
    const rd_kafka_message_t *first = core->messages[core->next];
    rd_kafka_topic_t *topic = first->rkt;
    int32_t partition = first->partition;
    int64_t dropped = 0;
    while (core->next < core->end) {
        const rd_kafka_message_t *message = core->messages[core->next];
        if (message == NULL || message->rkt != topic || message->partition != partition)
            break;
        release(core, core->next++);
        dropped++;
    }
    return dropped;
}

/* Drops the next pending records while they are records of the same partition as the first that are not for
 * the route's destination (ITEM_SKIP; at most `max_offsets`), writing their offsets: Python settles them as
 * passed. Returns how many. */
int64_t ferry_core_pass_run(struct ferry_core *core, int64_t *offsets, int64_t max_offsets) {
    if (core->next >= core->end || core->messages[core->next] == NULL)
        return 0;
    const rd_kafka_message_t *first = core->messages[core->next];
    rd_kafka_topic_t *topic = first->rkt;
    int32_t partition = first->partition;
    int64_t passed = 0;
    while (core->next < core->end && passed < max_offsets) {
        const rd_kafka_message_t *message = core->messages[core->next];
        const struct learned *entry;
        if (message == NULL || message->err != RD_KAFKA_RESP_ERR_NO_ERROR || message->rkt != topic ||
            message->partition != partition || action_of(core, message, &entry) != ITEM_SKIP)
            break;
        offsets[passed++] = message->offset;
        release(core, core->next++);
    }
    return passed;
}

/* Whether pending item `index` may join the open run of `topic`/`partition`, after `bytes` value bytes
 * (then `entry` says its copy's prefix). */
static int joins(struct ferry_core *core, ssize_t index, const rd_kafka_topic_t *topic, int32_t partition,
                 int64_t bytes, const struct ferry_core_run_args *args, const struct learned **entry) {
    if (index >= core->end)
        return 0;
    const rd_kafka_message_t *message = core->messages[index];
    return message != NULL && message->err == RD_KAFKA_RESP_ERR_NO_ERROR && message->rkt == topic &&
           message->partition == partition && (int64_t)message->len <= args->alone_above &&
           bytes + (int64_t)message->len <= args->room && action_of(core, message, entry) == ITEM_COPY;
}

/* Writes `value` (not negative) in decimal at `out`; returns how many digits (snprintf costs more per record). */
static int decimal(char *out, int64_t value) {
    char digits[20];
    int count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    for (int i = 0; i < count; i++)
        out[i] = digits[count - 1 - i];
    return count;
}

static struct confluent_msgstate *opaque_for(const struct ferry_core_run_args *args, void *callback) {
    if (callback == NULL)
        return NULL;
    struct confluent_msgstate *opaque = calloc(1, sizeof *opaque);
    if (opaque != NULL) {
        opaque->handle = args->producer_handle;
        opaque->dr_cb = callback;
    }
    return opaque;
}

/*
 * Hands the producer the run of the next pending records (Python peeked the first: ITEM_COPY): the records
 * of its partition that follow in a row whose copies are known (ITEM_COPY), none larger than `alone_above`
 * unless it is the first (then it is the run alone), their value bytes within `room`. Each copy has the
 * record's headers without its provenance header, then its new one. The run's first record carries
 * `on_first` (a run of one: `on_last`), its last `on_last`, those between `on_between` (or nothing). Each
 * record's source offset is written to `offsets` (at most `max_offsets` records go in one call).
 *
 * A run may take more than one call: when the producer's queue is full (RUN_QUEUE_FULL: the record is
 * offered again by the next call, with `handed_before` and `bytes_before` what the run handed so far)
 * and when it refuses a record (RUN_REFUSED: the record stays pending, as it was). Returns 0, or -1
 * when memory ran out.
 */
int ferry_core_send_run(struct ferry_core *core, const struct ferry_core_run_args *args, int64_t *offsets,
                        int64_t max_offsets, struct ferry_core_run_out *out) {
    memset(out, 0, sizeof *out);
    const struct learned *entry = NULL;
    if (core->next >= core->end || core->messages[core->next] == NULL ||
        action_of(core, core->messages[core->next], &entry) != ITEM_COPY)
        return 0;
    /* The run's partition, kept by value: each record's event (its message) is freed once produced. */
    const rd_kafka_topic_t *run_topic = core->messages[core->next]->rkt;
    int32_t run_partition = core->messages[core->next]->partition;
    int64_t handed = args->handed_before, bytes = args->bytes_before;
    char value[512];
    while (core->next < core->end && out->handed < max_offsets) {
        rd_kafka_message_t *message = (rd_kafka_message_t *)core->messages[core->next];
        /* Python offers a call's first record only when it joins the run; each later one joined (and
         * `entry` became its prefix) when the record before it was found not to be the last. */
        const struct learned *next_entry = NULL;
        int is_first = handed == 0;
        int alone = (int64_t)message->len > args->alone_above;
        int is_last = alone ||
                      !joins(core, core->next + 1, run_topic, run_partition, bytes + (int64_t)message->len, args,
                             &next_entry) ||
                      out->handed + 1 == max_offsets;
        if (entry->prefix_len > sizeof value - 24)
            return -1;
        void *callback = is_last ? args->on_last : is_first ? args->on_first : args->on_between;
        struct confluent_msgstate *opaque = opaque_for(args, callback);
        if (callback != NULL && opaque == NULL)
            return -1;
        memcpy(value, entry->prefix, entry->prefix_len);
        int digits = decimal(value + entry->prefix_len, message->offset < 0 ? 0 : message->offset);
        rd_kafka_headers_t *headers = NULL;
        rd_kafka_headers_t *previous = NULL; /* a copy of a copy: its headers as they were, for a refusal */
        if (rd_kafka_message_detach_headers(message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR || headers == NULL)
            headers = rd_kafka_headers_new(1);
        if (entry->head != NULL) {
            previous = rd_kafka_headers_copy(headers);
            rd_kafka_header_remove(headers, core->header);
        }
        rd_kafka_header_add(headers, core->header, -1, value, (ssize_t)(entry->prefix_len + (size_t)digits));
        rd_kafka_timestamp_type_t timestamp_type;
        int64_t timestamp = rd_kafka_message_timestamp(message, &timestamp_type);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            args->producer, RD_KAFKA_V_TOPIC(args->destination_topic),
            RD_KAFKA_V_PARTITION(args->destination_partition), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_VALUE(message->payload, message->len), RD_KAFKA_V_KEY(message->key, message->key_len),
            RD_KAFKA_V_TIMESTAMP(timestamp_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? 0 : timestamp),
            RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            /* Not produced: the record goes back as it was. */
            free(opaque);
            if (previous != NULL) {
                rd_kafka_headers_destroy(headers);
                headers = previous;
            } else {
                rd_kafka_header_remove(headers, core->header);
            }
            rd_kafka_message_set_headers(message, headers);
            out->status = err == RD_KAFKA_RESP_ERR__QUEUE_FULL ? RUN_QUEUE_FULL : RUN_REFUSED;
            out->error = err;
            return 0;
        }
        if (previous != NULL)
            rd_kafka_headers_destroy(previous);
        if (callback == NULL) {
        } else if (callback == args->on_last && is_last) {
            out->last_refs++;
        } else if (is_first) {
            out->first_refs++;
        } else {
            out->between_refs++;
        }
        if (out->handed == 0)
            out->first_offset = message->offset;
        out->last_offset = message->offset;
        offsets[out->handed++] = message->offset;
        out->bytes += (int64_t)message->len;
        handed++;
        bytes += (int64_t)message->len;
        release(core, core->next++);
        if (is_last) {
            out->status = RUN_CLOSED;
            return 0;
        }
        entry = next_entry;
    }
    out->status = RUN_CLOSED; /* not reached with max_offsets above the run: every run ends on its last */
    return 0;
}
